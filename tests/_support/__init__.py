"""What the tests share, as importable modules (``from tests._support.meshes import ...``).

Helpers live here rather than in a ``conftest.py``: pytest imports each ``conftest.py``
under the bare name ``conftest``, so ``from conftest import x`` gets whichever loaded
first. The root ``tests/conftest.py`` holds the fixtures and hooks; the modules here
hold the functions they and the tests call.

- :mod:`tests._support.meshes`: a test's mesh URL on each backend, and its cleanup.
- :mod:`tests._support.timing`: how much longer to wait on a loaded machine.
- :mod:`tests._support.processes`: ``plait`` (or any command) as a child process that
  logs to a file, stopped and reaped after.
- :mod:`tests._support.cli`: ``plait`` run in the test process, answering as its own
  process would, for tests of what a command prints or stores (not of the process).
"""
