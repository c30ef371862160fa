-- Math as MathML that Chromium draws right. pandoc writes \overline{g\hat x}
-- with an accent of U+00AF MACRON, which MathML Core browsers do not stretch:
-- the bar shrinks to a dash over one letter. TeX Gyre Pagella Math (the font
-- every page carries, see style.css) has a horizontal assembly for U+0332,
-- so the overline is drawn with that character, stretched over its base.
-- \bar x (U+203E, one letter wide) is left as it is.
local MACRON_ACCENT = '<mo accent="true">¯</mo>'
local STRETCHED_BAR = '<mo accent="true" stretchy="true">&#x332;</mo>'

local function literal(text) return (text:gsub('%p', '%%%0')) end

function Math(math)
  local html = pandoc.write(pandoc.Pandoc({ pandoc.Plain{ math } }), 'html5',
                            { html_math_method = { method = 'mathml' } })
  local fixed, count = html:gsub(literal(MACRON_ACCENT), STRETCHED_BAR)
  if count == 0 then return nil end
  return pandoc.RawInline('html', fixed)
end
