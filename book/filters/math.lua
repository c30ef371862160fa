-- Math as MathML that Chromium draws right. pandoc writes MathML that
-- MathML Core browsers set badly in three places; each fix below is a plain
-- rewrite of pandoc's output for one Math element.
--
-- 1. \overline{g\hat x} is an accent of U+00AF MACRON, which they do not
--    stretch: the bar shrinks to a dash over one letter. TeX Gyre Pagella
--    Math (the font every page carries, see style.css) has a horizontal
--    assembly for U+0332, so the overline is drawn with that character,
--    stretched over its base. \bar x (U+203E, one letter wide) stays.
-- 2. Every matched pair of brackets comes as a stretchy fence, even a
--    plain (x), and Chromium draws a stretchy bracket from the font's
--    larger variants, with wide side bearings: "f ( x )". In TeX only
--    \left and \right stretch, so in math without them no bracket does.
--    \big( and \Big( come with minsize and maxsize as plain numbers (a
--    multiple of the normal size, in MathML 3), which MathML Core ignores,
--    and stretchy="false": they are given in em, and allowed to stretch.
-- 3. \operatorname{var}, \log and \max are <mo> with no entry in the
--    operator dictionary, which gives them the wide default space on both
--    sides: "var ( x )". TeX's spacing is a thin space, and none before an
--    opening bracket.
local OVERLINE = { '<mo accent="true">¯</mo>', '<mo accent="true" stretchy="true">&#x332;</mo>' }
local FIXED_BRACKET = { '<mo stretchy="true" form="(%a+)">', '<mo stretchy="false" form="%1">' }
local SIZED_BRACKET = { '<mo minsize="([%d.]+)" maxsize="([%d.]+)" stretchy="false"',
                        '<mo minsize="%1em" maxsize="%2em" stretchy="true"' }

local function literal(text) return (text:gsub('%p', '%%%0')) end

local function space_operator_names(html)
  html = html:gsub('<mo>(%a%a+)</mo>(<mrow><mo stretchy="%a+" form="prefix">)',
                   '<mo lspace="0.1667em" rspace="0">%1</mo>%2')
  return (html:gsub('<mo>(%a%a+)</mo>', '<mo lspace="0.1667em" rspace="0.1667em">%1</mo>'))
end

function Math(element)
  local html = pandoc.write(pandoc.Pandoc({ pandoc.Plain{ element } }), 'html5',
                            { html_math_method = { method = 'mathml' } })
  html = html:gsub(literal(OVERLINE[1]), OVERLINE[2])
  if not element.text:find('\\left') then html = html:gsub(FIXED_BRACKET[1], FIXED_BRACKET[2]) end
  html = html:gsub(SIZED_BRACKET[1], SIZED_BRACKET[2])
  return pandoc.RawInline('html', space_operator_names(html))
end
