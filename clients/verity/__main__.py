"""`python -m verity …` is the `verity` command."""
from verity.entry import main

main()
