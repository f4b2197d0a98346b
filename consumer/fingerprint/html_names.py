"""The names of HTML elements, for telling markup and style rules from plain text."""

# Known element names only: plain text uses angle brackets too (Reuters writes tickers as <BP>
# and companies as <Sedio N.V.>), and those must stay words.
HTML_ELEMENTS = (
    "a|abbr|address|area|article|aside|audio|b|base|bdi|bdo|big|blockquote|body|br|button|"
    "canvas|caption|center|cite|code|col|colgroup|data|datalist|dd|del|details|dfn|dialog|div|"
    "dl|dt|em|embed|fieldset|figcaption|figure|font|footer|form|h[1-6]|header|hgroup|hr|html|i|"
    "img|input|ins|kbd|label|legend|li|link|main|map|mark|meta|meter|nav|object|ol|optgroup|"
    "option|output|p|param|picture|pre|progress|q|rp|rt|ruby|s|samp|section|select|small|"
    "source|span|strike|strong|sub|summary|sup|table|tbody|td|textarea|tfoot|th|thead|time|"
    "title|tr|track|tt|u|ul|var|video|wbr"
)
