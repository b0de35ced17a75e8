"""A Hugging Face GPT-2 built from a small GPT2Config (no download): a language model for the token tasks.

Example::

    python render.py train --model examples/tiny_gpt2.py:build --set data=reverse

The tool finds two residual additions per block, ``transformer.h.0.attn`` and ``transformer.h.0.mlp`` (the
output object's ``.logits`` are scored, one prediction per token), and trains the same GPT-2 without them.
``vocab`` must cover the task's token ids: the data's ``vocab`` + 1 (BOS is 0), 9 for the default of 8.
"""

from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging


def build(layers: int = 2, width: int = 32, heads: int = 2, vocab: int = 9, positions: int = 16,
          dropout: float = 0.0) -> GPT2LMHeadModel:
    logging.set_verbosity_error()  # a vocabulary this small draws a warning about GPT-2's BOS id 50256
    config = GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=width, n_layer=layers, n_head=heads,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)
