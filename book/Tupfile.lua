-- The book, written to book/html/: a page per chapter (NAME.html for the
-- chapter directory chapters/NAME), index.html and book.epub. Each chapter is
-- first read through the filters that include code and run programs, and
-- through citeproc (its citations, [@key], against references.bib; its list
-- of them in its "References" section, the div #refs), into build/NAME.json,
-- so its programs run once for the page and the EPUB both.
--
-- To add a chapter, add its directory name to CHAPTERS, in reading order. Its
-- number comes from the name (04-kv-cache is Chapter 4), its title from the
-- front matter of its chapter.md, and its Tupfile must put its program and
-- every SVG figure in its group <book> (`|> offset-error.svg <book>`), which
-- the rules below take as input: a command may only read a generated file
-- that its rule declares.
-- Every page is also in the group <pages>, which tests/book loads in a browser.
-- `./configure --no-book` (a machine without pandoc or gnuplot) leaves the book out.
if tup.getconfig('BOOK') == 'n' then return end

local CHAPTERS = { '01-cancellation', '02-layernorm', '03-softmax-topk', '04-kv-cache' }
-- The appendices, after the chapters, lettered in this order: each is
-- appendix/NAME.md, its page html/NAME.html. "answers" is filled with the
-- chapters' answers to their exercises (filters/answers.lua).
local APPENDICES = { 'how-it-is-made', 'notation', 'answers' }

local function chapter_dir(name) return '../chapters/' .. name end

local function concat(...)
  local all = {}
  for _, list in ipairs({ ... }) do
    for _, item in ipairs(list) do table.insert(all, item) end
  end
  return all
end

-- Everything that writes a page or the EPUB knows the chapter list, for the
-- numbers and links that filters/book.lua makes and the cross-references
-- that filters/xref.lua makes and checks.
local BOOK = 'pandoc --fail-if-warnings --metadata-file=metadata.yaml'
             .. ' -M chapters="' .. table.concat(CHAPTERS, ' ') .. '"'
             .. ' -M appendices="' .. table.concat(APPENDICES, ' ') .. '"'
             .. ' --lua-filter=filters/book.lua --lua-filter=filters/xref.lua --lua-filter=filters/math.lua'
             .. ' --mathml'
             .. ' --syntax-definition=cuda.xml'
local BOOK_FILES = { 'metadata.yaml', 'filters/book.lua', 'filters/xref.lua', 'filters/math.lua', 'filters/answers.lua',
                     'filters/chapter.lua', 'cuda.xml' }
local HTML = BOOK .. ' --to=html5 --template=template.html --css=style.css --self-contained'
local HTML_FILES = concat(BOOK_FILES, { 'template.html', 'pager.html', 'style.css', 'build/math.woff2' })

-- The math font every page carries (style.css): Debian's TeX Gyre Pagella
-- Math, compressed to WOFF2, which halves it. woff2_compress writes its
-- output next to its input, so the font is copied into build/ first.
local MATH_FONT = '/usr/share/texmf/fonts/opentype/public/tex-gyre-math/texgyrepagella-math.otf'
tup.definerule{
  command = '^ WOFF2 %o^ cp ' .. MATH_FONT .. ' build/math.otf && woff2_compress build/math.otf > /dev/null',
  outputs = { 'build/math.otf', 'build/math.woff2' },
}

-- A chapter's programs run when its page is filtered (filters/run.lua), and
-- some of them are benchmarks that time all the cores. So the filtering
-- waits for every test (the group <results>, which the book's own page test
-- stays out of), and run.lua runs the programs one at a time: a benchmark
-- then shares the machine with no test and no other benchmark.
local filtered, figures = {}, {}
for _, name in ipairs(CHAPTERS) do
  local json = 'build/' .. name .. '.json'
  local group = chapter_dir(name) .. '/<book>'
  table.insert(filtered, json)
  table.insert(figures, group)
  tup.definerule{
    inputs = { chapter_dir(name) .. '/chapter.md' },
    extra_inputs = { 'filters/template.lua', 'filters/include.lua', 'filters/run.lua',
                     'filters/figures.lua', 'filters/anchors.lua', 'filters/chapter.lua',
                     'references.bib', group, '../<results>' },
    command = '^ PANDOC %f^ pandoc --fail-if-warnings --from=markdown --to=json'
              .. ' --lua-filter=filters/template.lua'
              .. ' --lua-filter=filters/include.lua --lua-filter=filters/run.lua'
              .. ' --lua-filter=filters/figures.lua'
              .. ' --citeproc --bibliography=references.bib -M link-citations=true'
              .. ' --output=%o %f',
    outputs = { json },
  }
  tup.definerule{
    inputs = { json },
    extra_inputs = concat(HTML_FILES, { group }),
    command = '^ PANDOC %o^ ' .. HTML .. ' --from=json --toc -M page=' .. name
              .. ' --output=%o %f',
    outputs = { 'html/' .. name .. '.html', '<pages>' },
  }
end

-- An appendix page reads the filtered chapters (the answers are in them).
for _, name in ipairs(APPENDICES) do
  tup.definerule{
    inputs = { 'appendix/' .. name .. '.md' },
    extra_inputs = concat(HTML_FILES, filtered, figures),
    command = '^ PANDOC %o^ ' .. HTML .. ' --from=markdown --toc -M page=' .. name .. ' --output=%o %f',
    outputs = { 'html/' .. name .. '.html', '<pages>' },
  }
end
tup.definerule{
  inputs = { 'index.md' },
  extra_inputs = HTML_FILES,
  command = '^ PANDOC %o^ ' .. HTML .. ' --from=markdown --output=%o %f',
  outputs = { 'html/index.html', '<pages>' },
}

tup.definerule{
  inputs = { 'index.md' },
  extra_inputs = concat(BOOK_FILES, filtered, figures),
  command = '^ PANDOC %o^ ' .. BOOK .. ' --from=markdown --to=epub3 --output=%o %f',
  outputs = { 'html/book.epub' },
}

-- Every region marked in a source under common/, kernels/ or a chapter must
-- be included by a chapter (filters/check-anchors.lua). Tup fails on a glob
-- of a directory that does not exist, and kernels/ may not exist yet (git
-- keeps no empty directory); if it appears later, touch this file.
local source_dirs = { '../common' }
local kernels = io.open('../kernels')
if kernels then
  kernels:close()
  table.insert(source_dirs, '../kernels')
end
for _, name in ipairs(CHAPTERS) do table.insert(source_dirs, chapter_dir(name)) end
local sources = {}
for _, dir in ipairs(source_dirs) do
  for _, pattern in ipairs({ '*.c', '*.h', '*.cu', '*.cuh', '*.sh', '*.gp', 'chapter.md' }) do
    sources = concat(sources, tup.glob(dir .. '/' .. pattern))
  end
end
tup.definerule{
  inputs = sources,
  extra_inputs = { 'filters/check-anchors.lua', 'filters/anchors.lua', 'filters/chapter.lua' },
  command = '^ CHECK anchors^ pandoc --from=markdown --to=plain -M files="%f"'
            .. ' --lua-filter=filters/check-anchors.lua --output=%o < /dev/null',
  outputs = { 'build/anchors.txt' },
}
