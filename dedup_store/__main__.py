"""``python -m dedup_store``: the command line interface."""

from dedup_store.cli import main

if __name__ == "__main__":
    main()
