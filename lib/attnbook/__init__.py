"""attnbook."""
