"""A minimal fourth method, made as a plug-in would be: its package plus one registry line.

It asks one model to restate each meme's text (one stage), counts how many replies quote the
meme (its analysis, with a Wilson interval over memes), and leaves a result, a report section
and a part of the simulated world of its own. Nothing outside this package names it."""
