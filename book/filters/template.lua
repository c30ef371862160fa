-- Every chapter ends the same way, so that a reader knows where to look:
-- "What to remember", then "Exercises", then optionally "References", as
-- the last sections of the page. A chapter that does not fails the build.
local chapter = require 'filters.chapter'

local ENDING = { 'What to remember', 'Exercises' }

function Pandoc(doc)
  local titles = {}
  for _, block in ipairs(doc.blocks) do
    if block.t == 'Header' and block.level == 2 then
      table.insert(titles, pandoc.utils.stringify(block.content))
    end
  end
  if titles[#titles] == 'References' then table.remove(titles) end
  local last = { table.unpack(titles, #titles - #ENDING + 1) }
  for i, title in ipairs(ENDING) do
    if last[i] ~= title then
      chapter.fail('template', { string.format('%s: its last sections must be "%s", then optionally'
        .. ' "References"; found "%s"', chapter.source, table.concat(ENDING, '", "'),
        table.concat(last, '", "')) })
    end
  end
  return nil
end
