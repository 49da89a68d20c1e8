"""A sweep read back from MLflow: its rows, its text and its plot files.

Rows come from :mod:`.load`, text from :mod:`.render`, files from :mod:`.plots`.
"""
