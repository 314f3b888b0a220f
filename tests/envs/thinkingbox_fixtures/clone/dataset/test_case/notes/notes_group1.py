# A synthetic ThinkingBox-style test module (written for tbjax tests). The import below does not exist here:
# the loader must read this file with ast and never import it.
from thinkingbox.common import Judge, TestContext  # noqa: F401

"""!
scenario: notes_desk
"""


def validate_database(x):
    pass


def validate_rubrics_yesno(x, judge):
    pass


def test_add_one(x, judge):
    """!
    query: Please add a note saying "call Bob".
    user_context: |
      You are Ann. You want a note "call Bob".
    init:
      notes_desk:
        data_patch:
          notes:
            - {id: "2", text: "seeded by the test"}
        golden_test_case:
          tool_interactions:
            - tool: add_note
              parameters: {text: call Bob}
    """
    validate_database(x)


def test_nothing_to_do(x, judge):
    """!
    query: What notes are there?
    user_context: You are Ann.
    max_user_sim_turns: 2
    init:
      notes_desk:
        golden_test_case:
          tool_interactions: []
    """
    validate_database(x)


def test_add_two_with_rubric(x, judge):
    """!
    query: Add "a" and "b".
    user_context: You are Ann.
    init:
      notes_desk:
        golden_test_case:
          tool_interactions:
            - {tool: add_note, parameters: {text: a}}
            - {tool: add_note, parameters: {text: b}}
        rubrics_yesno:
          - Does the reply say both notes were added?
    """
    validate_database(x)
    validate_rubrics_yesno(x, judge)


def test_not_in_the_list(x, judge):
    """!
    query: unused
    user_context: unused
    """
    assert x.effects["notes_desk"]["custom"]
