"""Every docstring example reachable from the public API of gpuprivacy runs (STYLE rule 24).

One collector for the whole package: it imports ``gpuprivacy`` and every public
submodule (no path component starting with ``_``), gathers the docstrings of
the module and of everything its public names reach (functions, classes and
their members), and runs each example once, under the module that reaches it
first. The defining (private) modules of those objects contribute their module
docstrings and module-level examples too, so examples kept in private modules
(``gpuprivacy.mechanisms._covering._pure``, ``gpuprivacy.designs._*``)
run as well.
"""

import doctest
import importlib
import inspect
import pkgutil
import warnings

import pytest

import gpuprivacy

OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
SKIPPED_MODULES = {"gpuprivacy.__main__"}  # importing it runs the command line


def _public_modules():
    names = ["gpuprivacy"]
    for info in pkgutil.walk_packages(gpuprivacy.__path__, "gpuprivacy."):
        if info.name in SKIPPED_MODULES or any(part.startswith("_") for part in info.name.split(".")):
            continue
        names.append(info.name)
    return sorted(names)


def _ours(obj):
    return (getattr(obj, "__module__", None) or "").startswith("gpuprivacy")


def _collect():
    """{public module: [DocTest]}, each example under the first public module that reaches it."""
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    seen_objects, seen_tests = set(), set()
    collected = {}
    for module_name in _public_modules():
        module = importlib.import_module(module_name)
        roots = [(module_name, module)]
        for name in sorted(dir(module)):
            obj = getattr(module, name)
            if name.startswith("_") or inspect.ismodule(obj) or not _ours(obj):
                continue
            if callable(obj):  # functions, classes, and wrapped functions (functools.lru_cache, partial)
                roots.append((f"{module_name}.{name}", obj))
                # The defining module's own docstring and module-level examples (private modules included).
                defining = inspect.getmodule(obj)
                if defining is not None and defining.__name__ != module_name:
                    roots.append((defining.__name__, defining))
        tests = []
        for root_name, root in roots:
            if id(root) in seen_objects:
                continue
            seen_objects.add(id(root))
            # Examples see their defining module's globals and the public module's names, as under testmod.
            defining = root if inspect.ismodule(root) else inspect.getmodule(root)
            globs = {**vars(defining), **vars(module)} if defining is not None else dict(vars(module))
            if inspect.ismodule(root):
                # Examples of the module docstring and of objects defined in it, private ones included.
                found = finder.find(root, root_name, globs=globs)
            else:
                found = finder.find(root, root_name, module=False, globs=globs)
            for test in found:
                ident = (test.filename, test.lineno, test.name.rsplit(".", 1)[-1], test.docstring)
                if test.examples and ident not in seen_tests:
                    seen_tests.add(ident)
                    tests.append(test)
        if tests:
            collected[module_name] = tests
    return collected


DOCTESTS = _collect()


def test_the_collector_reaches_the_examples_of_every_family():
    names = {test.name for tests in DOCTESTS.values() for test in tests}
    for expected in ["laplace_mechanism", "sens_o_matic", "private_median", "piecewise_laplace",
                     "blackbox_estimate", "gaussian_rnm_epsilon"]:
        assert any(name.endswith("." + expected) for name in names), expected


@pytest.mark.parametrize("module_name", sorted(DOCTESTS))
def test_docstring_examples(module_name):
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for test in DOCTESTS[module_name]:
            runner.run(test)
    assert runner.tries > 0
    assert runner.failures == 0, f"{runner.failures} docstring example(s) failed; run pytest -s to see them."
