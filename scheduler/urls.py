"""Printing URLs and error texts without the secrets in them.

Database and transport URLs carry passwords; their text ends up in
deployment logs, tickets and terminals.  Everything that prints a URL,
or an error that may quote one, goes through here.
"""

import re
from urllib import parse as urlparse

from oslo_utils import strutils
import sqlalchemy as sa

#: ``scheme://user:password@`` (and ``,user:password@`` of the next host
#: in a multi-host transport URL): what ``masked_url`` hides.
_USERINFO = re.compile(r'(://|,)([^:/@,\s]*):[^@\s]*?@')


def mask_text(text: str) -> str:
    """Every ``user:password@`` and ``password=...`` in ``text`` masked."""
    return strutils.mask_password(_USERINFO.sub(r'\1\2:***@', text))


def masked_url(url: str | None) -> str:
    """``url`` with any password replaced by ``***``, safe to print.

    SQLAlchemy renders a database URL with its password hidden; the text
    masking then covers what it leaves (a ``password`` query parameter)
    and URLs it cannot read, such as a multi-host transport URL.
    """
    if not url:
        return '-'
    try:
        text = sa.make_url(url).render_as_string(hide_password=True)
    except Exception:
        text = url
    return mask_text(text)


def hide(text: str, secret: str | None) -> str:
    """``text`` without ``secret``, as written or URL-quoted."""
    if secret:
        secret = str(secret)
        for form in (secret, urlparse.quote(secret, safe=''),
                     urlparse.quote_plus(secret)):
            text = text.replace(form, '***')
    return text


def mask_secret(text: str, url: str | None) -> str:
    """``text`` with ``url``, and the password in it, masked.

    Driver errors sometimes quote the URL or the password they were
    given; this keeps an error line as safe to print as the URL.
    """
    if url:
        text = text.replace(url, masked_url(url))
        try:
            text = hide(text, sa.make_url(url).password)
        except Exception:
            pass
    return mask_text(text)
