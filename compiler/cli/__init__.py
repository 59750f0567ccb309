"""The ``flowc`` command: ``main`` reads the arguments and loads the command's module
(``compile``, ``run``, ``diff``, ``fmt``, ``test``, ``lsp``) only when it runs;
``input`` reads and compiles a .flow file as the options say, ``output`` prints.

May import: every package; nothing imports it but ``flowc.__main__``. It imports
:mod:`flowc.runtime` inside the commands that run Spark only, so ``flowc compile`` never
loads pyspark.
"""
