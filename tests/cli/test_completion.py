"""`agent-canvas completion bash|zsh`: the generated script, loaded into a real shell, completes subcommands,
options, choices and files."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from services.cli.main import main


def script(shell: str, capsys) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def complete(script_text: str, words: list[str], cwd) -> list[str]:
    """COMPREPLY after <Tab> on the last word of `words`, in bash."""
    quoted = " ".join("'" + word.replace("'", "'\\''") + "'" for word in words)
    program = f"""{script_text}
COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}
_agent_canvas
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, cwd=cwd,
                            timeout=30)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return [line for line in result.stdout.splitlines() if line]


def test_bash_completes_commands_options_choices_and_files(capsys, tmp_path):
    text = script("bash", capsys)
    assert "complete -o filenames -F _agent_canvas agent-canvas" in text
    (tmp_path / "canvas.json").write_text("{}")
    assert complete(text, ["agent-canvas", "ru"], tmp_path) == ["run", "runs"]
    assert complete(text, ["agent-canvas", "runs", ""], tmp_path) == ["list", "show", "tail", "cancel"]
    assert complete(text, ["agent-canvas", "canvas", "r"], tmp_path) == ["revisions", "rollback"]
    assert "--after-seq" in complete(text, ["agent-canvas", "runs", "tail", "--"], tmp_path)
    assert complete(text, ["agent-canvas", "runs", "list", "--limit", "5", "--st"], tmp_path) == ["--status"]
    assert complete(text, ["agent-canvas", "serve", "s"], tmp_path) == ["store", "sandbox"]
    assert complete(text, ["agent-canvas", "completion", ""], tmp_path) == ["bash", "zsh"]
    assert complete(text, ["agent-canvas", "validate", "can"], tmp_path) == ["canvas.json"]  # a FILE argument
    assert complete(text, ["agent-canvas", "runs", "list", "--config", "c"], tmp_path) == ["canvas.json"]
    assert complete(text, ["agent-canvas", "runs", "show", "--config", "x", "--js"], tmp_path) == ["--json"]


def test_the_zsh_script_loads_the_same_function_through_bashcompinit(capsys, tmp_path):
    text = script("zsh", capsys)
    assert text.startswith("#compdef agent-canvas\n") and "bashcompinit" in text
    assert "_agent_canvas()" in text
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed")
    # zsh filters the candidates by the typed prefix itself; the function's part is the candidates.
    program = ("autoload -U compinit && compinit -u -D\n" + text
               + '\nemulate sh; COMP_WORDS=(agent-canvas runs ""); COMP_CWORD=2; _agent_canvas\n'
               + 'printf "%s\\n" "${COMPREPLY[@]}"\n')
    result = subprocess.run([zsh, "-f", "-c", program], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout.split() == ["list", "show", "tail", "cancel"]
