"""The few constructs a report is written in, as text or markdown."""

from __future__ import annotations


class Doc:
    """The few constructs the report uses, in text or markdown."""

    def __init__(self, markdown: bool):
        self.md = markdown
        self.lines: list[str] = []

    def title(self, text: str) -> None:
        self.lines += [f"# {text}", ""] if self.md else [text, "=" * len(text), ""]

    def h(self, text: str) -> None:
        self.lines += [f"## {text}", ""] if self.md else [text, "-" * len(text), ""]

    def h3(self, text: str) -> None:
        self.lines += [f"### {text}" if self.md else f"{text}:", ""]

    def p(self, text: str) -> None:
        self.lines += [text, ""]

    def code(self, text: str) -> None:
        body = text.splitlines()
        self.lines += (["```", *body, "```"] if self.md else ["    " + line for line in body]) + [""]

    def items(self, items: list[str]) -> None:
        self.lines += [f"- {i}" for i in items] + [""]

    def table(self, head: list[str], rows: list[list[str]]) -> None:
        if not rows:
            return
        if self.md:
            esc = lambda c: c.replace("|", "\\|")  # noqa: E731 - flag values can hold pipes
            self.lines += ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
            self.lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
        else:
            widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
            fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
            self.lines += [fmt(head), fmt(["-" * w for w in widths]), *[fmt(r) for r in rows]]
        self.lines.append("")

    def link(self, text: str, path: str) -> str:
        return f"[{text}]({path})" if self.md else f"{text} ({path})" if text != path else path

    def image_text(self, alt: str, path: str) -> str:
        return f"![{alt}]({path})" if self.md else f"Plot: {path} ({alt})."

    def tick(self, text: str) -> str:
        return f"`{text}`" if self.md else text

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"
