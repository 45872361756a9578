"""Files and trees that an agent or a candidate wrote, handled without following anything they
made: opened, read, walked, copied and surveyed one component at a time through `O_NOFOLLOW`
descriptors (`open_untrusted`, `read_untrusted`, `walk_untrusted`, `copy_untrusted`,
`survey`), handed back to a uid and removed at any depth (`lchown_tree`, `remove_tree`,
`temporary_tree`), and their names shown as one line of text (`name_line`, `printable`).
Imports nothing of optarena: every package may use it (isolation itself is
`optarena.sandbox`)."""

from optarena.files._untrusted import (
    Entry,
    Survey,
    SurveyFinding,
    UntrustedFileError,
    Walk,
    copy_entry,
    copy_untrusted,
    entries_under,
    lchown_tree,
    name_line,
    open_untrusted,
    printable,
    read_untrusted,
    refusal,
    remove_tree,
    survey,
    temporary_tree,
    walk_untrusted,
)

__all__ = [
    "Entry",
    "Survey",
    "SurveyFinding",
    "UntrustedFileError",
    "Walk",
    "copy_entry",
    "copy_untrusted",
    "entries_under",
    "lchown_tree",
    "name_line",
    "open_untrusted",
    "printable",
    "read_untrusted",
    "refusal",
    "remove_tree",
    "survey",
    "temporary_tree",
    "walk_untrusted",
]
