"""feltdb's side of the suite (run with the project's ``.venv`` python)."""
