"""Engines, one file each behind `backends.base.Backend`; registry.py names them (imported only when chosen)."""
