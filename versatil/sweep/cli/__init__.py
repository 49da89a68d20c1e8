"""The commands of ``python -m versatil.sweep``, one module each; the table is :mod:`.main`."""
