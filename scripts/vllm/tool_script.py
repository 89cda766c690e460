"""A vLLM logits processor for the tests: the random-weight model calls tools.

vLLM samples every token itself; this processor leaves it one token to
choose at each step, the next token of a scripted answer: a call of the
math domain's think tool on the first two turns of a conversation, then a
call of finish with the answer 42, each ended by <|im_end|>. The logprobs
vLLM reports are the model's own (its default logprobs mode is the raw
logits, before any processor). Loaded with
--logits-processors tool_script:ToolScript, this directory on PYTHONPATH.
PRORL_TOOL_SCRIPT_DELAY_MS slows each step, so that a test can pause
generation while a turn is under way.
"""

import os
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import torch
from tokenizers import Tokenizer
from vllm import SamplingParams
from vllm.config import VllmConfig
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

IM_START, ASSISTANT, IM_END = 151644, 77091, 151645
THINK = '<tool_call>\n{"name": "think", "arguments": {"thought": "add the units"}}\n</tool_call>'
FINISH = '<tool_call>\n{"name": "finish", "arguments": {"message": "\\\\boxed{42}"}}\n</tool_call>'


class ToolScript(AdapterLogitsProcessor):
    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        super().__init__(vllm_config, device, is_pin_memory)
        tok = Tokenizer.from_file(str(Path(vllm_config.model_config.model) / "tokenizer.json"))
        self.think = tok.encode(THINK, add_special_tokens=False).ids + [IM_END]
        self.finish = tok.encode(FINISH, add_special_tokens=False).ids + [IM_END]
        self.delay = float(os.environ.get("PRORL_TOOL_SCRIPT_DELAY_MS", "0")) / 1000

    def is_argmax_invariant(self) -> bool:
        return False

    def new_req_logits_processor(self, params: SamplingParams) -> Callable[[list[int], list[int], torch.Tensor], torch.Tensor]:
        return self.force

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if self.delay and self.req_info:
            time.sleep(self.delay)  # once per step
        return super().apply(logits)

    def force(self, prompt_ids: list[int], output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        # Turns so far: the assistant headers in the prompt, this one included.
        heads = [i for i, (a, b) in enumerate(pairwise(prompt_ids)) if (a, b) == (IM_START, ASSISTANT)]
        script = self.think if len(heads) < 3 else self.finish
        # A turn continued after a pause has its first tokens in the prompt,
        # after the header's newline.
        done = len(prompt_ids) - (heads[-1] + 3) if heads else 0
        k = done + len(output_ids)
        nxt = script[k] if k < len(script) else IM_END
        keep = logits[nxt].item()
        logits.fill_(float("-inf"))
        logits[nxt] = keep
        return logits
