"""Which files may leave the box: only paths inside the server's root dir.

A request names paths as the file browser does (relative to the root dir, '/'-separated).
A path is refused when it has a ``..`` part, is absolute, is hidden (a part starting with
'.', unless the admin allows hidden files), or resolves — through a symlink anywhere on
the way — outside the root dir. A folder is exported with the files under it, each one
checked the same way.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path, PurePosixPath

from ...core.i18n import _
from ...core.refusal import Refusal
from ..inputs import is_unicode, shown

#: file extensions the file browser offers the export on (folders always)
CHECKPOINT_EXTENSIONS = (".pt", ".pth", ".ckpt", ".safetensors", ".bin")


@dataclass(frozen=True)
class SourceFile:
    #: the file on disk (resolved)
    path: Path
    #: where it goes, relative to the export's name ('' for a single file)
    relative: str
    size_bytes: int


@dataclass(frozen=True)
class Source:
    """One requested path: a file, or a folder and the files under it."""

    #: as the user named it, relative to the root dir
    requested: str
    name: str
    is_dir: bool
    files: tuple[SourceFile, ...]

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_source(root_dir: str, requested: object, *, allow_hidden: bool) -> Source:
    if not isinstance(requested, str) or not requested.strip():
        text = _("each path must be a non-empty string, not {value}")
        raise Refusal(text.format(value=shown(requested)), 400)
    path = shown(requested)
    if len(requested) > 4096:
        text = _("{path} is not a path: at most 4096 characters, not {n}")
        raise Refusal(text.format(path=path, n=len(requested)), 400)
    if not is_unicode(requested) or "\x00" in requested:
        text = _("{path} is not a path: it has a NUL or invalid text")
        raise Refusal(text.format(path=path), 400)
    text = requested.strip().replace("\\", "/")
    pure = PurePosixPath(text)
    if pure.is_absolute() or (len(text) > 1 and text[1] == ":"):
        raise Refusal(
            _("{path}: give a path relative to the Jupyter root folder").format(path=path),
            HTTPStatus.FORBIDDEN,
        )
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not parts:
        raise Refusal(
            _("the Jupyter root folder itself cannot be exported; choose a file or folder"),
            HTTPStatus.FORBIDDEN,
        )
    if ".." in parts:
        raise Refusal(
            _("{path}: '..' is not allowed in an export path").format(path=path),
            HTTPStatus.FORBIDDEN,
        )
    if not allow_hidden and any(p.startswith(".") for p in parts):
        hidden = _(
            "{path} is hidden; the administrator can allow hidden files with "
            "c.GpuCost.export_allow_hidden"
        )
        raise Refusal(hidden.format(path=path), HTTPStatus.FORBIDDEN)
    root = Path(root_dir).resolve()
    candidate = root.joinpath(*parts)
    if not os.path.lexists(candidate):
        raise Refusal(_("{path} does not exist").format(path=path), 404)
    real = candidate.resolve()
    if not _inside(real, root):
        outside = _("{path} leads outside the Jupyter root folder (a symlink)")
        raise Refusal(outside.format(path=path), HTTPStatus.FORBIDDEN)
    name = parts[-1]
    if real.is_file():
        return Source(text, name, False, (SourceFile(real, "", real.stat().st_size),))
    if not real.is_dir():
        raise Refusal(
            _("{path} is not a regular file or folder").format(path=path), HTTPStatus.FORBIDDEN
        )
    files = _walk(real, root, allow_hidden=allow_hidden, requested=text, seen={real})
    if not files:
        empty = _("{path} is an empty folder: nothing to export")
        raise Refusal(empty.format(path=path), 400)
    return Source(text, name, True, tuple(files))


def _link_outside(requested: str, inside: Path) -> str:
    text = _("{path} contains {inside}, a symlink leading outside the Jupyter root folder")
    return text.format(path=shown(requested), inside=str(inside))


def _walk(
    folder: Path, root: Path, *, allow_hidden: bool, requested: str, seen: set[Path]
) -> list[SourceFile]:
    found: list[SourceFile] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        if not allow_hidden:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        # a symlinked folder inside: follow it only if it stays under the root
        for d in list(dirnames):
            link = here / d
            if link.is_symlink():
                dirnames.remove(d)
                target = link.resolve()
                if not _inside(target, root):
                    raise Refusal(
                        _link_outside(requested, link.relative_to(folder)), HTTPStatus.FORBIDDEN
                    )
                if target in seen or any(s in target.parents for s in seen):
                    continue  # a link back into what is already exported: a loop
                seen.add(target)
                # its files are exported through the link's name
                for sub in _walk(
                    target, root, allow_hidden=allow_hidden, requested=requested, seen=seen
                ):
                    rel = (link.relative_to(folder) / sub.relative).as_posix()
                    found.append(SourceFile(sub.path, rel, sub.size_bytes))
        for f in sorted(filenames):
            if not allow_hidden and f.startswith("."):
                continue
            entry = here / f
            real = entry.resolve()
            if not _inside(real, root):
                raise Refusal(
                    _link_outside(requested, entry.relative_to(folder)), HTTPStatus.FORBIDDEN
                )
            try:
                info = real.stat()
            except OSError:
                continue  # a dangling link: nothing to copy
            if not stat.S_ISREG(info.st_mode):
                continue
            found.append(SourceFile(real, entry.relative_to(folder).as_posix(), info.st_size))
    return found
