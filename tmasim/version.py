"""The package version, apart from ``tmasim/__init__.py`` so that modules can name it without
importing the package facade (which imports them)."""

__version__ = "0.1.0"
