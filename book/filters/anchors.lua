-- Named regions of source files, marked as mdBook marks them:
--     // ANCHOR: merge_welford_states
--     ...
--     // ANCHOR_END: merge_welford_states
-- Only the marker and the name count, so any comment syntax works (# in a
-- shell or gnuplot script). Regions may nest or overlap; a name is used once
-- per file.
local anchors = {}

local function marker(line)
  local name = line:match('ANCHOR:%s*([%w_]+)')
  if name then return 'begin', name end
  name = line:match('ANCHOR_END:%s*([%w_]+)')
  if name then return 'end', name end
end

-- Reads PATH. Returns its lines, its regions (name -> first and last line
-- strictly between the markers, and the line of the ANCHOR) and its problems
-- (a marker without its partner, a name used twice), or nil and an error.
function anchors.scan(path)
  local file, err = io.open(path)
  if not file then return nil, err end
  local source = { path = path, lines = {}, regions = {}, problems = {} }
  local open = {}
  local function problem(line, text)
    table.insert(source.problems, string.format('%s:%d: %s', path, line, text))
  end
  for line in file:lines() do
    table.insert(source.lines, line)
    local n = #source.lines
    local kind, name = marker(line)
    if kind == 'begin' then
      if open[name] or source.regions[name] then
        problem(n, 'second ANCHOR: ' .. name)
      else
        open[name] = n
      end
    elseif kind == 'end' then
      if open[name] then
        source.regions[name] = { first = open[name] + 1, last = n - 1, line = open[name] }
        open[name] = nil
      else
        problem(n, 'ANCHOR_END: ' .. name .. ' without an ANCHOR before it')
      end
    end
  end
  file:close()
  local unclosed = {}
  for name, n in pairs(open) do table.insert(unclosed, { n = n, name = name }) end
  table.sort(unclosed, function(a, b) return a.n < b.n end)
  for _, anchor in ipairs(unclosed) do
    problem(anchor.n, 'ANCHOR: ' .. anchor.name .. ' has no ANCHOR_END')
  end
  return source
end

-- The text of region NAME of a scanned source, without the markers of the
-- regions nested in it, and dedented: shown on its own, a function body
-- should not start four spaces in. Each nested region named in ELIDED (a
-- set of names, may be nil) is left out, one line in its place saying
-- what it does and that it is shown apart, as PBRT shows its fragments:
--     // ... keep the next row in flight (shown below)
-- A listing of a long function becomes its outline, and its parts listings
-- of their own, with prose between them.
function anchors.text(source, name, elided)
  local region = source.regions[name]
  local lines, indent = {}, math.huge
  local i = region.first
  while i <= region.last do
    local line = source.lines[i]
    local kind, inner = marker(line)
    if kind == 'begin' and elided and elided[inner] then
      local fragment = source.regions[inner]
      local first_code = source.lines[fragment.first] or ''
      table.insert(lines, first_code:match('^%s*') .. '// ... ' .. inner:gsub('_', ' ') .. ' (shown below)')
      elided[inner] = 'used'
      i = fragment.last + 2 -- past its ANCHOR_END
    else
      if not kind then table.insert(lines, line) end
      i = i + 1
    end
  end
  for _, line in ipairs(lines) do
    if line:match('%S') then indent = math.min(indent, #line:match('^%s*')) end
  end
  for k, line in ipairs(lines) do
    lines[k] = line:sub(math.min(indent, #line) + 1)
  end
  return table.concat(lines, '\n')
end

return anchors
