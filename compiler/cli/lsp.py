"""``flowc lsp``: the language server over stdio (needs ``flowc[lsp]``: pygls)."""

from __future__ import annotations

import argparse

from flowc.cli.output import EXIT_ERRORS, EXIT_OK, write_stderr


def lsp(args: argparse.Namespace) -> int:
    try:
        from flowc.lsp.server import main
    except ImportError as error:
        write_stderr(
            f"error: flowc lsp needs pygls ({error.name} is not installed): "
            "pip install 'flowc[lsp]'\n"
        )
        return EXIT_ERRORS
    main()
    return EXIT_OK
