-- Listings are cut from the source that is compiled and tested, never typed
-- into the prose. An empty code block
--     ```{.c include="variance.c" region="update_welford_state"}
--     ```
-- becomes the region of that name in that file (relative to the chapter;
-- see anchors.lua), keeping its classes for highlighting, with a caption
-- under it that names the file and the functions the region defines, or
-- the one it is part of: the way from the book back to the source. A
-- listing longer than MOST_LINES fails the build.
-- elide="a b" leaves the regions a and b nested in it out, one line in the
-- place of each (anchors.text), for listings of their own. A
-- missing file or region fails the build: a listing that quietly
-- disappeared, or showed other code than the program runs, would be worse
-- than no page.
local anchors = require 'filters.anchors'
local chapter = require 'filters.chapter'

local errors = {}

-- The name of the function whose definition starts at line I of SOURCE, or
-- nil. A definition starts at column 0, names its function before the first
-- '(' that no '=' precedes (macros in capitals and compiler words such as
-- __launch_bounds__ are skipped), and reaches a '{' before any ';'.
local KEYWORDS = { ['if'] = true, ['for'] = true, ['while'] = true, ['switch'] = true,
                   ['return'] = true, ['sizeof'] = true, ['defined'] = true }

local function is_macro(name) return name:match('^[%u%d_]+$') ~= nil or name:match('^__') ~= nil end

local function opens_a_body(lines, i)
  for j = i, math.min(i + 8, #lines) do
    local code = lines[j]:gsub('//.*', ''):gsub('/%*.-%*/', '')
    local brace, semicolon = code:find('{', 1, true), code:find(';', 1, true)
    if brace or semicolon then return brace ~= nil and (not semicolon or brace < semicolon) end
  end
  return false
end

local function defined_function(lines, i)
  local line = lines[i]
  if line:match('^[%s#/%*}]') or line:match('^typedef') or line:match('^struct') then return nil end
  local head = line:gsub('^template%s*%b<>%s*', '')
  local before_equals = head:match('^[^=]*')
  -- A generic function named through a macro: REAL TYPED(variance_naive)(...)
  local generic = before_equals:match('[%u_]+%(([%a_][%w_]*)%)%s*%(')
  if generic then return opens_a_body(lines, i) and generic or nil end
  for name in before_equals:gmatch('([%a_][%w_]*)%s*%(') do
    if not KEYWORDS[name] and not is_macro(name) then
      return opens_a_body(lines, i) and name or nil
    end
  end
  local last_call = before_equals:match('([%a_][%w_]*)%s*%b()%s*$')
  if last_call and is_macro(last_call) and lines[i + 1] then
    local name = lines[i + 1]:match('^%s*([%a_][%w_]*)%s*%(')
    if name and opens_a_body(lines, i + 1) then return name end
  end
  return nil
end

local C_LIKE = { c = true, h = true, cu = true, cuh = true }

-- The functions REGION of SOURCE defines outside the nested regions it
-- ELIDES; or, when it defines none, the one its first line lies in (found
-- by walking up to a definition, stopping at the closing brace of an
-- earlier one).
local function functions_of(source, region, elided)
  if not C_LIKE[source.path:match('%.(%w+)$') or ''] then return {}, nil end
  local shown = {}
  for i = region.first, region.last do shown[i] = true end
  for inner in pairs(elided or {}) do
    local fragment = source.regions[inner]
    for i = fragment.first, fragment.last do shown[i] = nil end
  end
  local defined = {}
  for i = region.first, region.last do
    local name = shown[i] and defined_function(source.lines, i)
    if name then table.insert(defined, name) end
  end
  if #defined > 0 then return defined, nil end
  for i = region.line - 1, 1, -1 do
    local name = defined_function(source.lines, i)
    if name then return defined, name end
    if source.lines[i]:match('^}') then break end
  end
  return defined, nil
end

-- "kernels/online_softmax.h: softmax_state_push()", or ", in f()".
local function caption(source, region, elided)
  local path = source.path:gsub('^%.%./', '')
  local inlines = { pandoc.Code(path) }
  local defined, enclosing = functions_of(source, region, elided)
  if enclosing then
    inlines = { pandoc.Code(path), pandoc.Str(','), pandoc.Space(), pandoc.Str('in'),
                pandoc.Space(), pandoc.Code(enclosing .. '()') }
  elseif #defined > 0 then
    table.insert(inlines, pandoc.Str(':'))
    for k, name in ipairs(defined) do
      table.insert(inlines, pandoc.Space())
      table.insert(inlines, pandoc.Code(name .. '()'))
      if k < #defined then table.insert(inlines, pandoc.Str(',')) end
    end
  end
  return pandoc.Div({ pandoc.Plain(inlines) }, { class = 'listing-caption' })
end

-- A listing is read in one go, with prose around it that says what it
-- does: about 30 lines, never more than this.
local MOST_LINES = 40

local function listing(block)
  local path, name = block.attributes.include, block.attributes.region
  local where = string.format('%s: include="%s" region="%s": ', chapter.source, path, name or '')
  if not name then return nil, where .. 'no region given' end
  if block.text ~= '' then return nil, where .. 'the block must be empty' end
  local source, err = anchors.scan(chapter.resolve(path))
  if not source then return nil, where .. err end
  if #source.problems > 0 then return nil, where .. table.concat(source.problems, '; ') end
  if not source.regions[name] then return nil, where .. 'no such region in ' .. source.path end
  local elided = nil
  for inner in (block.attributes.elide or ''):gmatch('%S+') do
    elided = elided or {}
    elided[inner] = 'asked'
  end
  local text = anchors.text(source, name, elided)
  for inner, state in pairs(elided or {}) do
    if state ~= 'used' then return nil, where .. 'elide: ' .. inner .. ' is no region nested in ' .. name end
  end
  local _, newlines = text:gsub('\n', '')
  if newlines + 1 > MOST_LINES then
    return nil, string.format('%s%d lines, more than %d: split it (elide="..." shows nested regions apart)',
                              where, newlines + 1, MOST_LINES)
  end
  return text, caption(source, source.regions[name], elided)
end

function CodeBlock(block)
  if not block.attributes.include then return nil end
  local text, caption_or_err = listing(block)
  if not text then
    table.insert(errors, caption_or_err)
    return nil
  end
  block.text = text
  block.attributes.include = nil
  block.attributes.region = nil
  block.attributes.elide = nil
  return pandoc.Div({ block, caption_or_err }, { class = 'listing' })
end

function Pandoc()
  if #errors > 0 then chapter.fail('include', errors) end
end
