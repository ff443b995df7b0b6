"""`python -m verity …` is the `verity` command."""
from verity.cli import run

run()
