"""The sweep file: its schema, its axes, loading it, and what is checked before Ray starts.

The modules: :mod:`.sweep_file` (reading), :mod:`.axes`, :mod:`.sections`, :mod:`.schema`
(``SweepConfig``), :mod:`.load`, :mod:`.limits`, :mod:`.post_training`, :mod:`.trial` (a
trial's resolved configuration), :mod:`.checks` and :mod:`.shipped`. Nothing here imports
torch, Lightning, Ray or MLflow.
"""
