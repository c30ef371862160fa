-- Every chapter ends the same way, so that a reader knows where to look:
-- "What to remember", then "Exercises", then optionally "References", as
-- the last sections of the page, with 5 to 8 exercises, a numbered list.
-- A chapter that does not fails the build.
local chapter = require 'filters.chapter'

local ENDING = { 'What to remember', 'Exercises' }
local FEWEST_EXERCISES, MOST_EXERCISES = 5, 8

-- The number of items of the first numbered list under "Exercises".
local function count_exercises(blocks)
  local in_exercises = false
  for _, block in ipairs(blocks) do
    if block.t == 'Header' and block.level <= 2 then
      in_exercises = pandoc.utils.stringify(block.content) == 'Exercises'
    elseif in_exercises and block.t == 'OrderedList' then
      return #block.content
    end
  end
  return 0
end

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
  local exercises = count_exercises(doc.blocks)
  if exercises < FEWEST_EXERCISES or exercises > MOST_EXERCISES then
    chapter.fail('template', { string.format('%s: %d exercises; a chapter has %d to %d, a numbered list under'
      .. ' "Exercises"', chapter.source, exercises, FEWEST_EXERCISES, MOST_EXERCISES) })
  end
  return nil
end
