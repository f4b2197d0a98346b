"""Errors the user can act on. The CLI prints them as one line and exits non-zero."""


class NewsdedupError(Exception):
    """Base class: the message must tell the user what is wrong and what to do."""


class ConfigError(NewsdedupError):
    """A configuration option is missing, malformed or out of range; the message names it."""


class InputError(NewsdedupError):
    """An input file or argument cannot be used."""
