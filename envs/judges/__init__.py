"""Answer judges: deterministic phrase rubrics and an LLM yes/no judge."""
