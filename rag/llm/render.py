"""Plain-text rendering of chat messages for base models that have no chat template (Gemma 3 270M base).

Base models continue text; chat markup makes them ramble. We therefore join the system and user turns as
plain paragraphs and end with the user turn, whose prompt files end in a cue such as "Answer:". Earlier
assistant turns (few-shot or multi-step strategies) are appended verbatim so the model continues the dialogue.
"""

from __future__ import annotations


class PlainTextRenderer:
    def render(self, messages: list[dict[str, str]]) -> str:
        parts: list[str] = []
        for message in messages:
            content = message["content"].strip("\n")
            if message["role"] == "assistant":
                parts[-1:] = [(parts[-1] + " " + content) if parts else content]
            else:
                parts.append(content)
        return "\n\n".join(p for p in parts if p)
