-- Every region marked in the sources must be shown by some chapter: one that
-- no chapter includes is code the book claims to explain and doesn't (or a
-- misspelt region name). Also fails on a marker without its partner and on a
-- name used twice in a file. Not a filter of a page: the book's Tupfile runs
--     pandoc -M files="SOURCES CHAPTER.MD FILES" -L check-anchors.lua -o STAMP </dev/null
-- and the stamp says what was checked.
local anchors = require 'filters.anchors'
local chapter = require 'filters.chapter'

-- "file\0region" for every include block of the chapter at PATH.
local function included_by(path, included)
  local dir = pandoc.path.directory(path)
  pandoc.walk_block(pandoc.Div(chapter.read(path).blocks), {
    CodeBlock = function(block)
      local file, region = block.attributes.include, block.attributes.region
      if file and region then
        included[chapter.resolve(file, dir) .. '\0' .. region] = true
      end
    end,
  })
end

function Pandoc(doc)
  local sources, included = {}, {}
  for path in pandoc.utils.stringify(doc.meta.files):gmatch('%S+') do
    if pandoc.path.filename(path) == 'chapter.md' then
      included_by(path, included)
    else
      table.insert(sources, chapter.normalize(path))
    end
  end
  local errors, count = {}, 0
  for _, path in ipairs(sources) do
    local source = assert(anchors.scan(path))
    for _, problem in ipairs(source.problems) do table.insert(errors, problem) end
    local unused = {}
    for name, region in pairs(source.regions) do
      count = count + 1
      if not included[path .. '\0' .. name] then
        table.insert(unused, { line = region.line, name = name })
      end
    end
    table.sort(unused, function(a, b) return a.line < b.line end)
    for _, region in ipairs(unused) do
      table.insert(errors, string.format('%s:%d: no chapter includes region %s',
                                         path, region.line, region.name))
    end
  end
  if #errors > 0 then chapter.fail('check-anchors', errors) end
  return pandoc.Pandoc({ pandoc.Plain(string.format(
    '%d regions in %d source files, each included by a chapter.', count, #sources)) })
end
