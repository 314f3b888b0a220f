"""`python -m tbjax.assets.tiny OUT`: the random tiny Qwen a newcomer evaluates first, loadable with its
tokenizer as any HF directory is."""

import json

from rollout.interpret import Interpreter
from tbjax.assets.tiny import hf_config, main
from tbjax.models import from_pretrained


def test_the_command_writes_a_policy_that_loads_with_its_tokenizer(tmp_path, capsys):
    out = tmp_path / "tiny"
    main([str(out), "--arch", "qwen3", "--seed", "1"])
    assert f"wrote {out}" in capsys.readouterr().out
    interpreter = Interpreter.from_pretrained(out)
    written = json.loads((out / "config.json").read_text())
    assert written["hidden_size"] == hf_config("qwen3", len(interpreter.tokenizer))["hidden_size"]
    model = from_pretrained(out)
    assert model.config.vocab_size >= len(interpreter.tokenizer)
