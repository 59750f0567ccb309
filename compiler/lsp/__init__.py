"""``flowc lsp``: the language server (docs/editors.md). :mod:`flowc.lsp.analysis` holds
what it knows of a document, with no protocol; :mod:`flowc.lsp.server` speaks LSP through
pygls, installed with ``pip install 'flowc[lsp]'``; :mod:`flowc.lsp.wire` reads its frames
and answers every message pygls would drop.

May import: every stage up to the driver and the formatter; never :mod:`flowc.runtime`.
"""
