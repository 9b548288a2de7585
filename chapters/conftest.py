"""pytest hooks for the notebooks (nbval): on another device, checked cells compare with every
number masked (tools/nbval_device.py)."""
from tools.nbval_device import mask_trained_digits, on_another_device, remove_sanitizer


def pytest_configure(config):
    if on_another_device():
        mask_trained_digits(config)


def pytest_unconfigure(config):
    remove_sanitizer(config)
