"""``python -m commmodel`` (and ``torchrun -m commmodel``) is the same as the ``commmodel`` command."""

from commmodel.cli.app import main

if __name__ == "__main__":
    main()
