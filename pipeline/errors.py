"""Errors that mean "the input or the settings are wrong", not "the code is wrong".

Stage entry points turn these into a one-line message and a non-zero exit;
anything else is a bug and keeps its traceback.
"""


class LabError(Exception):
    """Base class for problems a user can fix."""


class ConfigError(LabError, ValueError):
    """A setting has a value that is not allowed; the message names key, value and what is allowed."""


class DataError(LabError, ValueError):
    """An input file or data set is missing, empty or malformed; the message names it."""


class MissingFileError(DataError, FileNotFoundError):
    """An input file or folder does not exist; the message names it and what writes it."""


class TrainingError(LabError, RuntimeError):
    """Training cannot go on (a non-finite loss, an unreadable checkpoint); the message says what to do."""
