"""Train the tiny tokenizer the fixtures were made with (no download): a byte-level BPE
of 2,000 tokens trained on the repo's docs, saved as a Hugging Face tokenizer directory
(tokenizer.json + tokenizer_config.json) that ``AutoTokenizer.from_pretrained(DIR)``
loads offline. Run with a Python that has ``transformers`` (any tool venv):

    python make_tokenizer.py OUT_DIR DOCS_DIR
"""

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast


def main(out_dir: Path, docs_dir: Path) -> None:
    lines = [
        line
        for path in sorted(docs_dir.glob("*.md"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        model_max_length=8192,
    )
    # A plain chat template, for tools that apply one.
    fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    fast.save_pretrained(str(out_dir))
    # transformers 5 names its own backend class; older releases (4.x, in some tools'
    # pins) know PreTrainedTokenizerFast, which both load.
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
