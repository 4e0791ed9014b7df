"""``python -m runkernel.cli``: the ``runkernel`` command."""

import sys

from runkernel.cli.entry import main

if __name__ == "__main__":  # importing this module (walking the package) runs nothing
    sys.exit(main())
