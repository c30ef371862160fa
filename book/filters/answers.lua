-- Exercises and their answers. In a chapter, an exercise is an item of the
-- numbered list under "## Exercises", and its answer a fenced div in it:
--     1. **A title.** The question, and the command that checks it.
--
--        ::: answer
--        The answer; its tables and numbers are the program's output, run
--        at build time like any other (filters/run.lua).
--        :::
-- The chapter's page keeps the question and links to the answer, which is
-- in the appendix of answers, so that the reader predicts before reading
-- it. filters/book.lua calls this module: `take` on each chapter, `page` to
-- fill the appendix's `::: answers` div.
local chapter = require 'filters.chapter'

local answers = {}

-- The appendix that holds the answers (book/Tupfile.lua's APPENDICES).
answers.APPENDIX = 'answers'

local function is_answer(block)
  return block.t == 'Div' and block.classes:includes('answer')
end

-- Where the exercises' list is: the index in blocks of the first numbered
-- list after the Exercises heading.
local function exercise_list(blocks)
  local in_exercises = false
  for i, block in ipairs(blocks) do
    if block.t == 'Header' and block.level <= 2 then
      in_exercises = block.level == 2 and pandoc.utils.stringify(block.content) == 'Exercises'
    elseif in_exercises and block.t == 'OrderedList' then
      return i
    end
  end
  return nil
end

-- The bold words that open an exercise, or nothing.
local function title_of(item)
  local first = item[1]
  if first and (first.t == 'Para' or first.t == 'Plain') and first.content[1]
      and first.content[1].t == 'Strong' then
    return first.content[1].content
  end
  return {}
end

function answers.exercise_id(label, k)
  return 'exercise-' .. label:match('%d+') .. '-' .. k
end

function answers.answer_id(label, k)
  return 'answer-' .. label:match('%d+') .. '-' .. k
end

-- Takes the answers out of the exercises in a chapter's blocks: each
-- exercise gets an id and, where its answer was, a link to it, made by
-- link_to(answer_id). Returns the blocks so changed, and the answers in
-- order, as { k, title, blocks }. An exercise with no answer, or two,
-- fails the build.
function answers.take(blocks, page, link_to)
  local at = exercise_list(blocks)
  if not at then return blocks, {} end
  local list = blocks[at]
  local items, taken = {}, {}
  for index, item in ipairs(list.content) do
    local k = list.listAttributes.start + index - 1
    local title = title_of(item) -- before the anchor goes in front of it
    local kept, found = {}, {}
    for _, block in ipairs(item) do
      if is_answer(block) then table.insert(found, block) else table.insert(kept, block) end
    end
    if #found ~= 1 then
      chapter.fail('answers', { string.format('%s, exercise %d: %d answers, expected one', page.label, k, #found) })
    end
    local anchor = pandoc.Span({}, pandoc.Attr(answers.exercise_id(page.label, k)))
    if kept[1] and (kept[1].t == 'Para' or kept[1].t == 'Plain') then
      local content = kept[1].content
      table.insert(content, 1, anchor)
      kept[1] = pandoc.Para(content)
    end
    table.insert(kept, pandoc.Para({ pandoc.Link({ pandoc.Str('Answer') },
                                                 link_to(answers.answer_id(page.label, k))) }))
    table.insert(items, kept)
    table.insert(taken, { k = k, title = title, blocks = found[1].content })
  end
  local changed = {}
  for i, block in ipairs(blocks) do changed[i] = block end
  changed[at] = pandoc.OrderedList(items, list.listAttributes)
  return changed, taken
end

-- An answer's links to its chapter's sections (#id), made to work from the
-- appendix (NAME.html#id).
local function linked_from_elsewhere(blocks, page)
  local function to_the_chapter(link)
    if link.target:match('^#') then
      link.target = page.href .. link.target
      return link
    end
  end
  return pandoc.walk_block(pandoc.Div(blocks), { Link = to_the_chapter }).content
end

-- The appendix's blocks for one chapter's answers: a heading per
-- exercise, a link back to it, the answer.
function answers.page(page, title, taken, link_to)
  local blocks = { pandoc.Header(2, { pandoc.Str(page.label .. '.'), pandoc.Space(), table.unpack(title) },
                                 pandoc.Attr('answers-' .. (page.label:lower():gsub(' ', '-')))) }
  for _, answer in ipairs(taken) do
    local number = page.label:match('%d+') .. '.' .. answer.k
    local heading = { pandoc.Str('Exercise ' .. number .. '.') }
    if #answer.title > 0 then
      table.insert(heading, pandoc.Space())
      for _, inline in ipairs(answer.title) do table.insert(heading, inline) end
    end
    table.insert(blocks, pandoc.Header(3, heading, pandoc.Attr(answers.answer_id(page.label, answer.k))))
    table.insert(blocks, pandoc.Para({ pandoc.Link({ pandoc.Str('The exercise') },
                                                   link_to(page, answers.exercise_id(page.label, answer.k))) }))
    for _, block in ipairs(linked_from_elsewhere(answer.blocks, page)) do table.insert(blocks, block) end
  end
  return blocks
end

-- The ids this module gives a page, which its source does not hold: a
-- chapter's exercises, and in the appendix (the page called `answers_name`)
-- every answer and the heading of each chapter's answers. For
-- filters/xref.lua, which checks the links to them. read(page) is the
-- page's source.
function answers.ids_of(page, pages, read)
  local ids = {}
  local function add_chapter(ch, id_of)
    local _, taken = answers.take(read(ch).blocks, ch, function(id) return id end)
    for _, answer in ipairs(taken) do ids[id_of(ch.label, answer.k)] = true end
  end
  if page.number then
    add_chapter(page, answers.exercise_id)
  elseif page.name == answers.APPENDIX then
    for _, ch in ipairs(pages) do
      if ch.number then
        add_chapter(ch, answers.answer_id)
        ids['answers-' .. (ch.label:lower():gsub(' ', '-'))] = true
      end
    end
  end
  return ids
end

function answers.is_placeholder(block)
  return block.t == 'Div' and block.classes:includes('answers')
end

return answers
