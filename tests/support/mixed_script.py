"""Chinese text quoting English, and copies that keep less of the English.

A sentence: just over half of the original's letters are Latin, so it is shingled by words; its
copy, one English word shorter, falls under half and is shingled by characters. Both are
compared by characters (tests/fingerprint/test_sketch.py, tests/cli/test_check.py).

A page (a report quoting a long English passage): three quarters of its letters are Latin, but
its Chinese letters make it one shingled by characters, as its copy with 30 % of the passage
cut is.
"""

from __future__ import annotations

_CHINESE = (
    "立法會財務委員會今日審議多項撥款申請，議員就醫療及房屋開支提出質詢，政府官員逐一回應。"
    "委員會主席表示，會議將於下週繼續，屆時會討論交通基建項目的追加撥款。"
    "有議員關注公立醫院輪候時間過長，要求當局交代增聘人手的進度；"
    "亦有議員批評公營房屋落成量未達目標，促請政府加快覓地。"
    "財經事務及庫務局局長在會上表示，今年財政狀況穩健，但需審慎理財。"
)
_ENGLISH = (
    "The finance committee reviewed several funding requests today, and members questioned "
    "officials about spending on hospitals and public housing. The chairman said the meeting "
    "would resume next week to discuss extra money for transport projects. Several members "
    "asked when the new hospital wings would open and how many nurses would be hired this "
    "year. Officials replied that recruitment had started and that two wings would open before "
    "the end of next year. The committee also heard that the housing budget would rise by "
    "eight percent, and that more land would be sold to build flats."
)

_OPENING = "立法會財務委員會今日審議多項撥款申請，議員就醫療及房屋開支提出質詢，政府官員逐一回應。"
ORIGINAL = _OPENING + " Members asked about new hospital wings and nurses."
COPY = _OPENING + " Members asked about hospital wings and nurses."

REPORT = _CHINESE + _ENGLISH
REPORT_COPY = _CHINESE + _ENGLISH[: int(len(_ENGLISH) * 0.7)]
