"""Start a domain of your own, outside this package: a working one-table domain to grow from.

    python -m envs.new_domain DIR/NAME      # writes the package NAME into DIR
    PYTHONPATH=DIR python -m envs.validate --domain NAME:DOMAIN

The package imports only `envs.sdk`: one table of products, one tool, a train template and a heldout one,
each task checked by the real tools and verifier. Rename, add tables, tools and templates, and run
`envs.validate` again; `envs/README.md` says what each part of a Domain means. Name it in `tasks.domains`,
`--domain` or an entry point of the group `tbjax.domains` (envs/README.md) to train or evaluate on it.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

STARTER = textwrap.dedent('''
    """{title}: the price and name of five products (a starter domain from `python -m envs.new_domain`)."""

    from envs.sdk import Domain, GenContext, Rubric, Sandbox, TaskDraft, UserScenario, call, must_exist, template


    def get_product(db: Sandbox, sku: str) -> dict:
        """The product with this SKU (e.g. P-001): its name and its price in cents."""
        return must_exist(db.one("SELECT * FROM products WHERE sku = ?", (sku,)), f"product {{sku}} not found")


    def _question(ctx: GenContext, asked: str, field: str) -> TaskDraft:
        row = ctx.pick("SELECT * FROM products ORDER BY sku")
        answer = str(row[field])
        return TaskDraft(scenario=UserScenario(opening=f"What is the {{asked}} of {{row['sku']}}?",
                                               goal=f"the {{asked}} of {{row['sku']}}"),
                         golden_path=[call("get_product", sku=row["sku"])],
                         rubrics=[Rubric(kind="must_mention", phrases=(answer,))],
                         reference_answer=f"The {{asked}} of {{row['sku']}} is {{answer}}.")


    @template(kind="information", split="train", variants=3)
    def ask_price(ctx: GenContext) -> TaskDraft:
        return _question(ctx, "price in cents", "price_cents")


    @template(kind="information", split="heldout", variants=2)
    def ask_name(ctx: GenContext) -> TaskDraft:
        return _question(ctx, "name", "name")


    def populate(conn, rng) -> None:
        conn.executemany("INSERT INTO products VALUES (?, ?, ?)",
                         [(f"P-{{i:03d}}", f"{{colour}} mug", rng.randrange(100, 2000))
                          for i, colour in enumerate(["red", "blue", "green", "white", "black"], start=1)])


    DOMAIN = Domain(
        name="{name}", description="{title}: product prices.",
        schema_sql="CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, price_cents INTEGER NOT NULL);",
        policy="You are {title}'s assistant. Look products up with get_product and answer briefly.",
        today="2026-01-01", populate=populate, tools=[get_product], templates=[ask_price, ask_name],
    )
''')


def starter_source(name: str) -> str:
    """The starter domain's module source, its domain named `name` (a Python identifier)."""
    if not name.isidentifier():
        raise ValueError(f"{name!r} is not a Python identifier; the package and the domain share the name, "
                         "so use letters, digits and underscores (e.g. my_shop)")
    return STARTER.format(name=name, title=name.replace("_", " ").title())


def write_starter(package_dir: Path) -> Path:
    """Writes the starter package at `package_dir` (its name is the domain's) and returns its __init__.py."""
    source = starter_source(package_dir.name)
    if package_dir.exists():
        raise FileExistsError(f"{package_dir} exists; pick a new folder name (it becomes the domain's name)")
    package_dir.mkdir(parents=True)
    init = package_dir / "__init__.py"
    init.write_text(source)
    return init


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envs.new_domain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("package", type=Path, help="DIR/NAME: the folder to create; NAME names the domain")
    args = parser.parse_args(argv)
    try:
        init = write_starter(args.package)
    except (ValueError, FileExistsError) as error:
        parser.error(str(error))
    name, folder = args.package.name, args.package.parent.resolve()
    print(f"wrote {init}\nvalidate it:  PYTHONPATH={folder} python -m envs.validate --domain {name}:DOMAIN")
    return 0


if __name__ == "__main__":
    sys.exit(main())
