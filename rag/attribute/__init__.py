"""Attribution: after generation, each answer sentence cites the prompt's passages that support it."""
