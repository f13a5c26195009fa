#!/usr/bin/env python3
"""Run bloatlab's browser test in a real browser through WebDriver and write
its result JSON (bench/web_vs_cli.sh's helper).

    web_page.py chromium|firefox URL OUT.json TIMEOUT_S
    CPU_THROTTLE=N web_page.py chromium ...   # the page's CPU N times slower
                                              # (DevTools' CPU throttling: a slow phone)
    NO_WEBRTC=1 web_page.py firefox ...       # WebRTC turned off (a privacy setting)
    SCREENSHOT=page.png web_page.py ...       # the whole page once its result shows, 1280 px wide

Chromium through Debian's chromedriver, Firefox (firefox-esr) through
geckodriver (`cargo install geckodriver`); selenium from PyPI. Prints how
long the page took on stderr; exits 2 without a result in time, 3 when
the page reported an error (printed).
"""
import sys, json, time
from selenium import webdriver
browser, url, out, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
if browser == 'chromium':
    o = webdriver.ChromeOptions()
    for a in ['--headless', '--no-sandbox', '--disable-gpu', '--window-size=1280,900', '--disable-background-networking']:
        o.add_argument(a)
    o.binary_location = '/usr/bin/chromium'
    d = webdriver.Chrome(options=o, service=webdriver.ChromeService(executable_path='/usr/bin/chromedriver'))
else:
    o = webdriver.FirefoxOptions()
    o.add_argument('-headless')
    o.binary_location = '/usr/bin/firefox-esr'
    o.set_preference('media.peerconnection.ice.loopback', True)
    import os
    if os.environ.get('NO_WEBRTC'):
        o.set_preference('media.peerconnection.enabled', False)
    import shutil
    d = webdriver.Firefox(options=o, service=webdriver.FirefoxService(executable_path=shutil.which('geckodriver')))
    d.set_window_size(1280, 900)
try:
    import os
    slow = float(os.environ.get('CPU_THROTTLE') or 1)
    if slow > 1:
        if browser != 'chromium':
            print('CPU_THROTTLE needs chromium (DevTools)', file=sys.stderr); sys.exit(1)
        d.execute_cdp_cmd('Emulation.setCPUThrottlingRate', {'rate': slow})
    d.get(url)
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = d.execute_script('return window.bloatlabResultJson || (window.bloatlabError ? "ERROR: " + window.bloatlabError : null)')
        if v:
            break
        time.sleep(0.5)
    if not v:
        print('no result in time', file=sys.stderr); sys.exit(2)
    if v.startswith('ERROR: '):
        print(v, file=sys.stderr); sys.exit(3)
    open(out, 'w').write(v)
    print('page took %.1f s' % (time.time() - t0), file=sys.stderr)
    shot = os.environ.get('SCREENSHOT')
    if shot:
        time.sleep(1)  # the result's figures and plot drawn
        h = d.execute_script('return document.documentElement.scrollHeight')
        d.set_window_size(1280, min(int(h) + 140, 8000))
        time.sleep(0.5)
        d.save_screenshot(shot)
finally:
    d.quit()
