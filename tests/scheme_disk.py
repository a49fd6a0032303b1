"""Local disk under a URI scheme, for tests of what goes through Beam's FileSystems (as gs://
paths do, with the same defaults: compression by the name's suffix unless told).
Importing this module registers the scheme ``beamcrawltest://``: its paths are local paths
after the scheme."""

from __future__ import annotations

import os

from apache_beam.io.filesystem import FileMetadata, MatchResult
from apache_beam.io.localfilesystem import LocalFileSystem

SCHEME = "beamcrawltest"
_PREFIX = f"{SCHEME}://"


def _local(path: str) -> str:
    return path[len(_PREFIX) :] if path.startswith(_PREFIX) else path


class SchemeDisk(LocalFileSystem):
    @classmethod
    def scheme(cls):
        return SCHEME

    def create(self, path, *args, **kwargs):
        os.makedirs(os.path.dirname(_local(path)), exist_ok=True)
        return super().create(_local(path), *args, **kwargs)

    def open(self, path, *args, **kwargs):
        return super().open(_local(path), *args, **kwargs)

    def match(self, patterns, limits=None):
        found = super().match([_local(p) for p in patterns], limits)
        return [
            MatchResult(pattern, [FileMetadata(_PREFIX + m.path, m.size_in_bytes) for m in result.metadata_list])
            for pattern, result in zip(patterns, found)
        ]

    def exists(self, path):
        return super().exists(_local(path))

    def delete(self, paths):
        for path in paths:
            os.remove(_local(path))

    def rename(self, sources, destinations):
        for dst in destinations:
            os.makedirs(os.path.dirname(_local(dst)), exist_ok=True)
        return super().rename([_local(p) for p in sources], [_local(p) for p in destinations])
