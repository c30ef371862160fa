-- Listings are cut from the source that is compiled and tested, never typed
-- into the prose. An empty code block
--     ```{.c include="variance.c" region="update_welford_state"}
--     ```
-- becomes the region of that name in that file (relative to the chapter;
-- see anchors.lua), keeping its classes for highlighting. A missing file or
-- region fails the build: a listing that quietly disappeared, or showed
-- other code than the program runs, would be worse than no page.
local anchors = require 'filters.anchors'
local chapter = require 'filters.chapter'

local errors = {}

local function listing(block)
  local path, name = block.attributes.include, block.attributes.region
  local where = string.format('%s: include="%s" region="%s": ', chapter.source, path, name or '')
  if not name then return nil, where .. 'no region given' end
  if block.text ~= '' then return nil, where .. 'the block must be empty' end
  local source, err = anchors.scan(chapter.resolve(path))
  if not source then return nil, where .. err end
  if #source.problems > 0 then return nil, where .. table.concat(source.problems, '; ') end
  if not source.regions[name] then return nil, where .. 'no such region in ' .. source.path end
  return anchors.text(source, name)
end

function CodeBlock(block)
  if not block.attributes.include then return nil end
  local text, err = listing(block)
  if not text then
    table.insert(errors, err)
    return nil
  end
  block.text = text
  block.attributes.include = nil
  block.attributes.region = nil
  return block
end

function Pandoc()
  if #errors > 0 then chapter.fail('include', errors) end
end
