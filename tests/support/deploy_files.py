"""The deployment examples read as their runners read them: a systemd unit and its
EnvironmentFile (as systemd parses them, for the plain values the examples use) and a
Dockerfile (its instructions, continuation lines joined, exec-form commands as JSON).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def unit_sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """A unit file's settings by section, in order (a key may repeat)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None, f"a setting outside a section: {line!r}"
        key, _, value = line.partition("=")
        current.append((key.strip(), value.strip()))
    return sections


def setting(sections: dict[str, list[tuple[str, str]]], section: str, key: str) -> str:
    """The last value of ``key`` in ``section`` (systemd's rule for a single value)."""
    values = [value for name, value in sections.get(section, []) if name == key]
    assert values, f"no {key}= in [{section}]"
    return values[-1]


def environment_file(text: str) -> dict[str, str]:
    """An EnvironmentFile's variables (``KEY=VALUE`` lines; ``#`` starts a comment line)."""
    variables: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            variables[key.strip()] = value.strip()
    return variables


def seconds(value: str) -> float:
    """A systemd time span of the examples' forms (``90``, ``90s``, ``2min``)."""
    found = re.fullmatch(r"(\d+)\s*(s|sec|min)?", value)
    assert found is not None, f"a time span of another form: {value!r}"
    return int(found[1]) * (60 if found[2] == "min" else 1)


@dataclass
class Dockerfile:
    """A Dockerfile's instructions, in order, each as (INSTRUCTION, arguments)."""

    instructions: list[tuple[str, str]]
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Dockerfile:
        joined = re.sub(r"\\\n", " ", "\n".join(
            line for line in text.splitlines() if not line.lstrip().startswith("#")
        ))  # fmt: skip
        instructions = []
        for line in joined.splitlines():
            if line.strip():
                name, _, rest = line.strip().partition(" ")
                instructions.append((name.upper(), rest.strip()))
        parsed = cls(instructions)
        for name, rest in instructions:
            if name == "ENV":
                parsed.env.update(dict(pair.split("=", 1) for pair in shlex.split(rest)))
        return parsed

    def all(self, name: str) -> list[str]:
        """The arguments of every ``name`` instruction."""
        return [rest for instruction, rest in self.instructions if instruction == name]

    def one(self, name: str) -> str:
        """The arguments of the last ``name`` instruction (the one in force)."""
        found = self.all(name)
        assert found, f"no {name} instruction"
        return found[-1]

    def cmd(self) -> list[str]:
        """CMD, which must be of the exec form (a JSON array: no shell between)."""
        argv: list[str] = json.loads(self.one("CMD"))
        return argv

    def healthcheck(self) -> tuple[dict[str, str], list[str]]:
        """HEALTHCHECK's options (``--interval=30s`` …) and its exec-form command."""
        options_text, _, command = self.one("HEALTHCHECK").partition(" CMD ")
        options = dict(option.removeprefix("--").split("=", 1) for option in options_text.split())
        argv: list[str] = json.loads(command)
        return options, argv

    def copies(self) -> list[tuple[list[str], str]]:
        """Each COPY's sources (relative to the build context) and its destination."""
        found = []
        for rest in self.all("COPY"):
            *sources, destination = rest.split()
            found.append((sources, destination))
        return found


def path_in(root: Path, absolute: str) -> Path:
    """Where the image's absolute path ``absolute`` lies under ``root`` here."""
    return root / absolute.lstrip("/")


def healthz(port: int) -> tuple[int, dict[str, str]]:
    """What a worker's ``GET /healthz`` on 127.0.0.1:``port`` answers (``0``: no answer)."""
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    except httpx.TransportError:
        return 0, {}
    body: dict[str, str] = answer.json()
    return answer.status_code, body
