"""``python -m plait.cli``: the ``plait`` command (how a worker pool starts its children)."""

from plait.cli import main

if __name__ == "__main__":
    main()
