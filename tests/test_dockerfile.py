import pytest

from evaluator.dockerfile import DockerfileError, expand, parse, parse_key_values

DF = """# syntax=docker/dockerfile:1
# a comment
FROM python:3.11-slim-bookworm
ARG V=2.7.0
ENV A=1 B="two words" \\
    C=${A}
ENV LEGACY value with spaces
RUN apt-get update && apt-get install -y \\
    # a comment inside a continuation
    git \\
 && rm -rf /var/lib/apt/lists/*
COPY --chmod=0755 environment/repo/ /app/repo/
RUN python - <<'PY'
import os
print("hi")
PY
RUN <<END
echo a
echo b
END
RUN ["echo", "exec form"]
WORKDIR /app/repo
"""


def test_parse_instructions_continuations_and_heredocs():
    steps = parse(DF)
    kinds = [s.kind for s in steps]
    assert kinds == ["FROM", "ARG", "ENV", "ENV", "RUN", "COPY", "RUN", "RUN", "RUN", "WORKDIR"]
    apt = steps[4]
    assert "\n" not in apt.text and "git" in apt.text and "#" not in apt.text
    assert steps[5].flags == {"chmod": "0755"} and steps[5].text == "environment/repo/ /app/repo/"
    py = steps[6]
    assert py.heredocs == [("PY", 'import os\nprint("hi")\n')]
    assert py.shell_script() == "python - <<'PY'\nimport os\nprint(\"hi\")\nPY\n"
    assert steps[7].shell_script() == "echo a\necho b\n"
    assert steps[8].shell_script() == "exec echo 'exec form'"


def test_env_forms_and_expansion():
    env: dict[str, str] = {}
    for k, v in parse_key_values('A=1 B="two words" C=${A}x', env):
        env[k] = v
    assert env == {"A": "1", "B": "two words", "C": "x"}  # C sees A only after this instruction
    assert parse_key_values("LEGACY value with spaces", {}) == [("LEGACY", "value with spaces")]
    assert expand("$VENV/bin:${PATH}:${MISSING:-dflt}", {"VENV": "/v", "PATH": "/p"}) == "/v/bin:/p:dflt"


def test_unclosed_heredoc_and_missing_from_are_errors():
    with pytest.raises(DockerfileError, match="never closed"):
        parse("FROM x\nRUN python - <<PY\nprint(1)\n")
    with pytest.raises(DockerfileError, match="FROM"):
        parse("RUN echo hi\n")
