"""doc/differences-from-nova.md names only tests that exist."""

import ast
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DOC = os.path.join(REPO, 'doc', 'differences-from-nova.md')
_REF = re.compile(r'`(tests/[\w/]+\.py)::(test_\w+)`')


def test_every_divergence_names_an_existing_test():
    with open(DOC) as f:
        text = f.read()
    refs = _REF.findall(text)
    assert len(refs) >= 20
    divergences = re.findall(r'^### \d+\. ', text, re.M)
    sections = re.split(r'^### ', text, flags=re.M)[1:]
    assert len(sections) == len(divergences)
    for section in sections:
        assert _REF.search(section), section.splitlines()[0]
    for path, name in refs:
        with open(os.path.join(REPO, path)) as f:
            tree = ast.parse(f.read())
        names = {node.name for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef)}
        assert name in names, '%s::%s' % (path, name)
